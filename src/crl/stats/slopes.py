"""Log-log slopes with bootstrap confidence intervals: the rate claims (C3, C4, C7, C8; later C5, C6, C10)."""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from crl.stats._validate import FloatArray, as_finite_1d, check_boot, log_points


@dataclass(frozen=True)
class SlopeFit:
    """A fitted power law ``y = exp(intercept) * x**slope`` with a bootstrap CI for the slope.

    Attributes:
        slope: point estimate of b in ``log y = a + b log x``.
        intercept: point estimate of a.
        ci_low: lower end of the slope's confidence interval.
        ci_high: upper end of the slope's confidence interval.
        ci_level: nominal coverage of ``[ci_low, ci_high]`` (e.g. 0.95).
        slope_se: standard error of the slope that the interval is built from.
        n_points: number of (x, y) points fitted.
        n_boot: number of bootstrap resamples drawn.
        method: ``"residual-bootstrap-t"``, ``"parametric-bootstrap"`` or ``"replicate-bootstrap"``.
        chi2: weighted residual sum of squares of the fit (``None`` when no standard errors were known).
        dof: degrees of freedom of the fit, ``n_points - 2``.
        max_relative_residual: ``max_i |y_i / yhat_i - 1|``, the misfit as an effect size (docs/theory.md
            section 7: above 5% the window is not a power law; see :func:`crl.stats.rate_fit`).
    """

    slope: float
    intercept: float
    ci_low: float
    ci_high: float
    ci_level: float
    slope_se: float
    n_points: int
    n_boot: int
    method: str
    chi2: float | None
    dof: int
    max_relative_residual: float

    def contains(self, value: float) -> bool:
        """Whether the slope's confidence interval contains ``value`` (ends included)."""
        return self.ci_low <= value <= self.ci_high

    @property
    def chi2_per_dof(self) -> float | None:
        """``chi2 / dof`` (``None`` without standard errors or degrees of freedom)."""
        return None if self.chi2 is None or self.dof < 1 else self.chi2 / self.dof

    @property
    def ci_width(self) -> float:
        """Width ``ci_high - ci_low`` of the slope's confidence interval."""
        return self.ci_high - self.ci_low

    def predict(self, x: ArrayLike) -> FloatArray:
        """The fitted curve ``exp(intercept) * x**slope`` at ``x`` (x > 0)."""
        return np.exp(self.intercept) * np.power(np.asarray(x, dtype=np.float64), self.slope)


def _check_rng(rng: object) -> np.random.Generator:
    """``rng`` itself if it is a numpy Generator (``TypeError`` naming the fix otherwise)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"rng={rng!r} is not a numpy Generator; pass rng=np.random.default_rng(seed) for the bootstrap resamples."
        )
    return rng


def loglog_slope(
    x: ArrayLike,
    y: ArrayLike,
    y_se: ArrayLike | None = None,
    *,
    rng: np.random.Generator,
    n_boot: int = 2000,
    ci: float = 0.95,
) -> SlopeFit:
    """Fit ``log y = a + b log x`` and give a bootstrap confidence interval for the slope b.

    Two bootstraps, chosen by whether standard errors are known:

    - ``y_se=None``: ordinary least squares (the point estimate equals ``scipy.stats.linregress`` on the logs)
      and a **residual bootstrap-t** interval: resample the OLS residuals (rescaled by sqrt(n/(n-2))), refit,
      studentise ``t* = (b* - b) / se(b*)`` and return ``[b - q_hi(t*) se(b), b - q_lo(t*) se(b)]``. The
      x values stay fixed (a designed grid), and the studentisation keeps the coverage close to nominal for
      the handful of points a sweep has.
    - ``y_se`` given (Monte-Carlo standard errors of each y): weighted least squares on the logs with
      ``sigma_i = y_se_i / y_i`` (delta method: ``sd(log y) ~ sd(y) / y``; accurate when ``y_se << y``) and a
      **parametric bootstrap**: ``log y*_i = a + b log x_i + sigma_i z_i``, z ~ N(0, 1), refit, percentile
      interval.

    The interval is never widened for misfit: misfit is reported as an effect size
    (``max_relative_residual``, and ``chi2`` when errors are known) and judged by :func:`crl.stats.rate_fit`.

    Args:
        x: the x-axis values (e.g. m), at least 3, all > 0, not all equal.
        y: the measured values, all > 0.
        y_se: standard errors of ``y`` (all > 0), or ``None``.
        rng: the generator for the resamples.
        n_boot: number of bootstrap resamples (>= 100).
        ci: confidence level in (0, 1).

    Returns:
        The :class:`SlopeFit`.

    Raises:
        ValueError: on fewer than 3 points, non-positive or non-finite x, y or y_se, mismatched lengths,
            ``n_boot < 100`` or ``ci`` outside (0, 1).
        TypeError: if ``rng`` is not a ``np.random.Generator`` (e.g. None).
    """
    rng = _check_rng(rng)
    lx, ly = log_points(x, y)
    check_boot(n_boot, ci)
    if y_se is None:
        return _residual_bootstrap_t(lx, ly, rng, n_boot, ci)
    se = as_finite_1d("y_se", y_se)
    if se.shape != lx.shape:
        raise ValueError(
            f"y_se has {se.size} entries but x has {lx.size}; pass one standard error per point."
        )
    if np.any(se <= 0.0):
        raise ValueError(
            f"y_se has entries <= 0 ({se[se <= 0.0][:3]}); pass y_se=None for error-free points."
        )
    sigma = se / np.exp(ly)
    return _parametric_bootstrap(lx, ly, sigma, rng, n_boot, ci)


def loglog_slope_from_replicates(
    x: ArrayLike,
    replicates: Sequence[ArrayLike],
    *,
    rng: np.random.Generator,
    n_boot: int = 2000,
    ci: float = 0.95,
) -> SlopeFit:
    """Fit ``log ybar = a + b log x`` to replicate means, with a replicate-level bootstrap CI for b.

    ``ybar_i`` is the mean of the replicates at ``x_i`` (e.g. seeds, or independent negative draws). The point
    estimate is OLS on ``(log x_i, log ybar_i)``. The bootstrap resamples the replicates *within* each x with
    replacement, recomputes the means and refits; the interval is the percentile interval of the refitted
    slopes. It thus needs no normality or delta method, only that replicates at one x are exchangeable.
    ``chi2`` uses ``sigma_i = se(ybar_i) / ybar_i``; the interval is not widened for misfit.

    Resamples in which some mean is <= 0 cannot be logged; if more than 1% of them are, this raises (the
    rate is then not resolved by the replicates: draw more, or drop the x values where y is within its error
    of 0); otherwise they are dropped and ``n_boot`` reports the resamples used.

    Args:
        x: the x-axis values, at least 3, all > 0, not all equal.
        replicates: one 1-D array of at least 2 finite replicates per x.
        rng: the generator for the resamples.
        n_boot: number of bootstrap resamples (>= 100).
        ci: confidence level in (0, 1).

    Raises:
        ValueError: on bad x, a replicate array with fewer than 2 finite values, a mean <= 0, or too many
            resamples with a mean <= 0.
        TypeError: if ``rng`` is not a ``np.random.Generator`` (e.g. None).
    """
    rng = _check_rng(rng)
    if len(replicates) != np.size(x):
        raise ValueError(
            f"replicates has {len(replicates)} arrays but x has {np.size(x)} values; pass one array per x."
        )
    groups = [as_finite_1d(f"replicates[{i}]", r) for i, r in enumerate(replicates)]
    for i, g in enumerate(groups):
        if g.size < 2:
            raise ValueError(f"replicates[{i}] has {g.size} values; pass at least 2 replicates per x.")
    means = np.array([g.mean() for g in groups])
    lx, ly = log_points(x, means)
    check_boot(n_boot, ci)
    boot_means = np.column_stack(
        [g[rng.integers(0, g.size, size=(n_boot, g.size))].mean(axis=1) for g in groups]
    )
    valid = np.all(boot_means > 0.0, axis=1)
    n_valid = int(valid.sum())
    if n_valid < 0.99 * n_boot:
        raise ValueError(
            f"{n_boot - n_valid} of {n_boot} bootstrap resamples have a mean <= 0, so the log-log slope is "
            "not resolved; draw more replicates or drop the x values whose mean is within its error of 0."
        )
    slopes = _ols_slopes(lx, np.log(boot_means[valid]))
    slope, intercept = _ols(lx, ly)
    sigma = np.array([g.std(ddof=1) / math.sqrt(g.size) for g in groups]) / means
    fit = (lx, ly, slope, intercept, sigma)
    return _bootstrap_fit(fit, slopes, ci, "replicate-bootstrap")


def _residual_bootstrap_t(
    lx: FloatArray, ly: FloatArray, rng: np.random.Generator, n_boot: int, ci: float
) -> SlopeFit:
    """OLS fit on the logs with a studentised residual-bootstrap interval for the slope."""
    n = lx.size
    slope, intercept = _ols(lx, ly)
    fitted = intercept + slope * lx
    residuals = ly - fitted
    se_hat = _ols_slope_se(lx, residuals[None, :])[0]
    scaled = residuals * math.sqrt(n / (n - 2))
    boot_ly = fitted + scaled[rng.integers(0, n, size=(n_boot, n))]
    boot_slopes = _ols_slopes(lx, boot_ly)
    boot_intercepts = boot_ly.mean(axis=1) - boot_slopes * lx.mean()
    boot_residuals = boot_ly - boot_intercepts[:, None] - boot_slopes[:, None] * lx
    boot_se = _ols_slope_se(lx, boot_residuals)
    usable = boot_se > 0.0
    if se_hat == 0.0 or not np.any(usable):
        lo = hi = slope
    else:
        t = (boot_slopes[usable] - slope) / boot_se[usable]
        q_lo, q_hi = np.quantile(t, [0.5 - ci / 2.0, 0.5 + ci / 2.0])
        lo, hi = slope - q_hi * se_hat, slope - q_lo * se_hat
    return SlopeFit(
        slope=slope,
        intercept=intercept,
        ci_low=float(lo),
        ci_high=float(hi),
        ci_level=ci,
        slope_se=float(se_hat),
        n_points=int(n),
        n_boot=int(usable.sum()),
        method="residual-bootstrap-t",
        chi2=None,
        dof=int(n - 2),
        max_relative_residual=_max_relative_residual(residuals),
    )


def _parametric_bootstrap(
    lx: FloatArray,
    ly: FloatArray,
    sigma: FloatArray,
    rng: np.random.Generator,
    n_boot: int,
    ci: float,
) -> SlopeFit:
    """WLS fit on the logs with weights 1/sigma^2 and a parametric-bootstrap interval for the slope."""
    weights = 1.0 / sigma**2
    slope, intercept = _wls(lx, ly, weights)
    fitted = intercept + slope * lx
    boot_ly = fitted + sigma * rng.standard_normal((n_boot, lx.size))
    boot_slopes = _wls_slopes(lx, boot_ly, weights)
    fit = (lx, ly, slope, intercept, sigma)
    return _bootstrap_fit(fit, boot_slopes, ci, "parametric-bootstrap")


def _bootstrap_fit(
    fit: tuple[FloatArray, FloatArray, float, float, FloatArray],
    boot_slopes: FloatArray,
    ci: float,
    method: str,
) -> SlopeFit:
    """The SlopeFit of a point fit ``(log x, log y, slope, intercept, sigma of log y)`` and its bootstrap slopes
    (percentile interval)."""
    lx, ly, slope, intercept, sigma = fit
    chi2 = _chi2(lx, ly, slope, intercept, sigma)
    lo, hi = _percentile_interval(boot_slopes, ci)
    return SlopeFit(
        slope=slope,
        intercept=intercept,
        ci_low=lo,
        ci_high=hi,
        ci_level=ci,
        slope_se=float(boot_slopes.std(ddof=1)),
        n_points=int(lx.size),
        n_boot=int(boot_slopes.size),
        method=method,
        chi2=chi2,
        dof=int(lx.size - 2),
        max_relative_residual=_max_relative_residual(ly - intercept - slope * lx),
    )


def _ols(lx: FloatArray, ly: FloatArray) -> tuple[float, float]:
    """Slope and intercept of the least-squares line through (lx, ly)."""
    slope = float(_ols_slopes(lx, ly[None, :])[0])
    return slope, float(ly.mean() - slope * lx.mean())


def _ols_slopes(lx: FloatArray, ly_rows: FloatArray) -> FloatArray:
    """OLS slope of each row of ``ly_rows`` (B, n) on ``lx``: ``sum (x-xbar)(y-ybar) / sum (x-xbar)^2``."""
    cx = lx - lx.mean()
    return np.asarray((ly_rows - ly_rows.mean(axis=1, keepdims=True)) @ cx / (cx @ cx))


def _ols_slope_se(lx: FloatArray, residual_rows: FloatArray) -> FloatArray:
    """Classical OLS standard error of the slope, ``sqrt(RSS / (n - 2) / Sxx)``, for each row of residuals."""
    cx = lx - lx.mean()
    rss = np.sum(residual_rows**2, axis=1)
    return np.asarray(np.sqrt(rss / (lx.size - 2) / (cx @ cx)))


def _wls(lx: FloatArray, ly: FloatArray, weights: FloatArray) -> tuple[float, float]:
    """Slope and intercept minimising ``sum w_i (ly_i - a - b lx_i)^2``."""
    slope = float(_wls_slopes(lx, ly[None, :], weights)[0])
    mean_x = float(weights @ lx / weights.sum())
    mean_y = float(weights @ ly / weights.sum())
    return slope, mean_y - slope * mean_x


def _wls_slopes(lx: FloatArray, ly_rows: FloatArray, weights: FloatArray) -> FloatArray:
    """Weighted least-squares slope of each row of ``ly_rows`` on ``lx``."""
    w = weights / weights.sum()
    cx = lx - w @ lx
    centred = ly_rows - (ly_rows @ w)[:, None]
    return np.asarray(centred @ (w * cx) / (w @ cx**2))


def _chi2(lx: FloatArray, ly: FloatArray, slope: float, intercept: float, sigma: FloatArray) -> float:
    """Weighted residual sum of squares ``sum ((ly - a - b lx) / sigma)^2``."""
    return float(np.sum(((ly - intercept - slope * lx) / sigma) ** 2))


def _percentile_interval(samples: FloatArray, ci: float) -> tuple[float, float]:
    """The central ``ci`` percentile interval of ``samples``."""
    q_lo, q_hi = np.quantile(samples, [0.5 - ci / 2.0, 0.5 + ci / 2.0])
    return float(q_lo), float(q_hi)


def _max_relative_residual(log_residuals: FloatArray) -> float:
    """``max |y / yhat - 1|`` from the residuals ``log y - log yhat`` of a log-log fit."""
    return float(np.max(np.abs(np.expm1(log_residuals))))
