"""Statistics behind the claims' verdicts: log-log slopes with bootstrap CIs, bound violations, plateaus.

Every claim of THEORY.md section 7 reduces its measurements to one of three questions:

- **a rate** (C3, C4, C7, C8, C10; C5/C6 vs n): the slope b of ``log y = a + b log x``, e.g. the SCRL inner
  error ``L(s) - E L_hat(s) ~ C / m`` ([A] Thm 4.5) has b = -1; the rule is "the CI of b contains -1"
  (:func:`loglog_slope`, :func:`loglog_slope_from_replicates`);
- **a bound** (C1, C2, C7, C9): how many measured values exceed their bound by more than their Monte-Carlo
  error (:func:`bound_violations`), e.g. C2's ``E* - E(s) <= sqrt((2/tau)(L(s) - L*))`` ([A] Thm 3.4);
- **a saturation point** (C6): the smallest m whose metric is within eps of its plateau
  (:func:`saturation_point`).

All randomness comes from a ``numpy.random.Generator`` passed in; every function is float64 and raises
``ValueError`` naming the argument on bad input (never a silent NaN).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as scipy_stats

FloatArray = NDArray[np.float64]

_MIN_POINTS = 3


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
        scale: factor ``max(1, sqrt(chi2 / dof))`` by which the interval was widened for lack of fit (1.0 when
            none was applied).
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
    scale: float

    def contains(self, value: float) -> bool:
        """Whether the slope's confidence interval contains ``value`` (ends included)."""
        return self.ci_low <= value <= self.ci_high

    @property
    def ci_width(self) -> float:
        """Width ``ci_high - ci_low`` of the slope's confidence interval."""
        return self.ci_high - self.ci_low

    def predict(self, x: ArrayLike) -> FloatArray:
        """The fitted curve ``exp(intercept) * x**slope`` at ``x`` (x > 0)."""
        return np.exp(self.intercept) * np.power(np.asarray(x, dtype=np.float64), self.slope)


@dataclass(frozen=True)
class ViolationCount:
    """How many measured values exceed their bound, and how many do so beyond their Monte-Carlo error.

    Attributes:
        n: number of (value, bound) pairs checked.
        count: number with ``value - bound > atol`` (raw, ignoring Monte-Carlo error).
        count_beyond_mc_error: number with ``value - bound > k * se + atol``.
        k: the multiple of the standard error used.
        max_excess: largest ``value - bound`` (negative when every value is below its bound).
        max_z: largest ``(value - bound) / se`` over pairs with ``se > 0`` (``None`` when every se is 0).
        worst_index: index of the pair with the largest excess.
        rate_upper: one-sided Clopper-Pearson upper confidence bound (level ``ci_level``) on the probability
            that a value violates its bound beyond MC error.
        ci_level: level of ``rate_upper``.
        expected_false: ``n * (1 - Phi(k))``, the expected count beyond MC error if every value sat exactly on
            its bound with normal errors of the given se (what a tight, true bound produces by chance).
    """

    n: int
    count: int
    count_beyond_mc_error: int
    k: float
    max_excess: float
    max_z: float | None
    worst_index: int
    rate_upper: float
    ci_level: float
    expected_false: float

    @property
    def holds(self) -> bool:
        """True when no value exceeds its bound beyond Monte-Carlo error."""
        return self.count_beyond_mc_error == 0


@dataclass(frozen=True)
class Saturation:
    """Where a metric reaches its plateau (C6's m*).

    Attributes:
        x_star: smallest x from which on the metric stays within eps of the plateau (log-linearly interpolated
            between grid points when requested).
        plateau: the plateau value used.
        index: index of the first grid point from which on every point is within eps.
        censored: True when already the first grid point is within eps, so the true saturation point is
            ``<= x_star`` (x_star is then ``x[0]``).
    """

    x_star: float
    plateau: float
    index: int
    censored: bool


@dataclass(frozen=True)
class MeanSE:
    """A sample mean with its standard error ``sd / sqrt(n)`` (sd with ddof=1)."""

    mean: float
    se: float
    n: int

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        """Student-t interval ``mean -/+ t_{n-1, (1+level)/2} * se``."""
        _check_level("level", level)
        half = float(scipy_stats.t.ppf(0.5 + level / 2.0, self.n - 1)) * self.se
        return self.mean - half, self.mean + half


def mean_se(values: ArrayLike) -> MeanSE:
    """Mean and standard error of replicates: ``mean = sum v / n``, ``se = sd(v, ddof=1) / sqrt(n)``.

    Args:
        values: at least two finite numbers.

    Raises:
        ValueError: if fewer than two values are given or any is not finite.
    """
    v = _as_finite_1d("values", values)
    if v.size < 2:
        raise ValueError(f"values has {v.size} entries; pass at least 2 replicates to estimate an error.")
    return MeanSE(float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size)), int(v.size))


def loglog_slope(
    x: ArrayLike,
    y: ArrayLike,
    y_se: ArrayLike | None = None,
    *,
    rng: np.random.Generator,
    n_boot: int = 2000,
    ci: float = 0.95,
    inflate_for_misfit: bool = True,
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
      interval. If the power law misfits (``chi2 / dof > 1``, chi2 the weighted residual sum of squares) and
      ``inflate_for_misfit``, the interval is widened about b by ``sqrt(chi2 / dof)`` (the Particle Data
      Group's scale factor), so that curvature the errors cannot explain shows up as width, not false
      precision.

    Args:
        x: the x-axis values (e.g. m), at least 3, all > 0, not all equal.
        y: the measured values, all > 0.
        y_se: standard errors of ``y`` (all > 0), or ``None``.
        rng: the generator for the resamples.
        n_boot: number of bootstrap resamples (>= 100).
        ci: confidence level in (0, 1).
        inflate_for_misfit: widen the parametric interval by the scale factor described above.

    Returns:
        The :class:`SlopeFit`.

    Raises:
        ValueError: on fewer than 3 points, non-positive or non-finite x, y or y_se, mismatched lengths,
            ``n_boot < 100`` or ``ci`` outside (0, 1).
    """
    lx, ly = _log_points(x, y)
    _check_boot(n_boot, ci)
    if y_se is None:
        return _residual_bootstrap_t(lx, ly, rng, n_boot, ci)
    se = _as_finite_1d("y_se", y_se)
    if se.shape != lx.shape:
        raise ValueError(
            f"y_se has {se.size} entries but x has {lx.size}; pass one standard error per point."
        )
    if np.any(se <= 0.0):
        raise ValueError(
            f"y_se has entries <= 0 ({se[se <= 0.0][:3]}); pass y_se=None for error-free points."
        )
    sigma = se / np.exp(ly)
    return _parametric_bootstrap(lx, ly, sigma, rng, n_boot, ci, inflate_for_misfit)


def loglog_slope_from_replicates(
    x: ArrayLike,
    replicates: Sequence[ArrayLike],
    *,
    rng: np.random.Generator,
    n_boot: int = 2000,
    ci: float = 0.95,
    inflate_for_misfit: bool = True,
) -> SlopeFit:
    """Fit ``log ybar = a + b log x`` to replicate means, with a replicate-level bootstrap CI for b.

    ``ybar_i`` is the mean of the replicates at ``x_i`` (e.g. seeds, or independent negative draws). The point
    estimate is OLS on ``(log x_i, log ybar_i)``. The bootstrap resamples the replicates *within* each x with
    replacement, recomputes the means and refits; the interval is the percentile interval of the refitted
    slopes. It thus needs no normality or delta method, only that replicates at one x are exchangeable.
    ``chi2`` uses ``sigma_i = se(ybar_i) / ybar_i``; with ``inflate_for_misfit`` the interval is widened about
    b by ``max(1, sqrt(chi2 / dof))`` as in :func:`loglog_slope`.

    Resamples in which some mean is <= 0 cannot be logged; if more than 1% of them are, this raises (the
    rate is then not resolved by the replicates: draw more, or drop the x values where y is within its error
    of 0); otherwise they are dropped and ``n_boot`` reports the resamples used.

    Args:
        x: the x-axis values, at least 3, all > 0, not all equal.
        replicates: one 1-D array of at least 2 finite replicates per x.
        rng: the generator for the resamples.
        n_boot: number of bootstrap resamples (>= 100).
        ci: confidence level in (0, 1).
        inflate_for_misfit: widen the interval by the scale factor.

    Raises:
        ValueError: on bad x, a replicate array with fewer than 2 finite values, a mean <= 0, or too many
            resamples with a mean <= 0.
    """
    if len(replicates) != np.size(x):
        raise ValueError(
            f"replicates has {len(replicates)} arrays but x has {np.size(x)} values; pass one array per x."
        )
    groups = [_as_finite_1d(f"replicates[{i}]", r) for i, r in enumerate(replicates)]
    for i, g in enumerate(groups):
        if g.size < 2:
            raise ValueError(f"replicates[{i}] has {g.size} values; pass at least 2 replicates per x.")
    means = np.array([g.mean() for g in groups])
    lx, ly = _log_points(x, means)
    _check_boot(n_boot, ci)
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
    chi2 = _chi2(lx, ly, slope, intercept, sigma)
    scale = _misfit_scale(chi2, lx.size - 2) if inflate_for_misfit else 1.0
    lo, hi = _percentile_interval(slopes, slope, ci, scale)
    return SlopeFit(
        slope=slope,
        intercept=intercept,
        ci_low=lo,
        ci_high=hi,
        ci_level=ci,
        slope_se=scale * float(slopes.std(ddof=1)),
        n_points=int(lx.size),
        n_boot=n_valid,
        method="replicate-bootstrap",
        chi2=chi2,
        dof=int(lx.size - 2),
        scale=scale,
    )


def bound_violations(
    values: ArrayLike,
    bounds: ArrayLike,
    se: ArrayLike | None = None,
    *,
    k: float | None = None,
    alpha: float = 0.05,
    atol: float = 0.0,
    ci: float = 0.95,
) -> ViolationCount:
    """Count the values that exceed their upper bound, raw and beyond Monte-Carlo error.

    A pair violates beyond MC error when ``value - bound > k * se + atol``. With ``k=None`` the multiple is
    the Bonferroni one, ``k = Phi^{-1}(1 - alpha / n)``: if every bound held with equality and each value were
    normal about it with standard error se, the probability of *any* violation beyond MC error would be at
    most alpha. So "zero violations beyond MC error" (C1's rule) has family-wise error <= alpha for a true,
    tight bound, however many points are checked. ``atol`` absorbs floating-point rounding of exactly computed
    quantities (se = 0).

    Args:
        values: measured values (e.g. C2's ``E* - E(s)``).
        bounds: their upper bounds (e.g. ``sqrt((2/tau)(L(s) - L*))``), same length; ``inf`` is allowed.
        se: standard errors of ``values - bounds`` (>= 0), or ``None`` for exactly computed values.
        k: multiple of se; ``None`` chooses the Bonferroni multiple for ``alpha``.
        alpha: family-wise error rate used when ``k`` is ``None``, in (0, 1).
        atol: absolute tolerance (>= 0) added to ``k * se``.
        ci: level of the Clopper-Pearson upper bound on the violation rate.

    Raises:
        ValueError: on empty or mismatched inputs, NaN, negative se, k < 0, atol < 0, or alpha or ci outside
            (0, 1).
    """
    v = _as_finite_1d("values", values)
    b = np.asarray(bounds, dtype=np.float64).reshape(-1)
    if b.shape != v.shape:
        raise ValueError(f"bounds has {b.size} entries but values has {v.size}; pass one bound per value.")
    if v.size == 0:
        raise ValueError("values is empty; pass at least one (value, bound) pair.")
    if np.any(np.isnan(b)) or np.any(b == -np.inf):
        raise ValueError("bounds contains NaN or -inf; every bound must be a number or +inf.")
    s = np.zeros_like(v) if se is None else _as_finite_1d("se", se)
    if s.shape != v.shape:
        raise ValueError(
            f"se has {s.size} entries but values has {v.size}; pass one standard error per value."
        )
    if np.any(s < 0.0):
        raise ValueError("se has negative entries; standard errors are >= 0.")
    _check_level("alpha", alpha)
    _check_level("ci", ci)
    if atol < 0.0:
        raise ValueError(f"atol={atol!r} must be >= 0.")
    if k is None:
        k = float(scipy_stats.norm.isf(alpha / v.size))
    elif not math.isfinite(k) or k < 0.0:
        raise ValueError(f"k={k!r} must be a finite number >= 0 (or None for the Bonferroni choice).")
    excess = v - b
    beyond = int(np.sum(excess > k * s + atol))
    positive_se = s > 0.0
    max_z = float(np.max(excess[positive_se] / s[positive_se])) if np.any(positive_se) else None
    worst = int(np.argmax(excess))
    return ViolationCount(
        n=int(v.size),
        count=int(np.sum(excess > atol)),
        count_beyond_mc_error=beyond,
        k=float(k),
        max_excess=float(excess[worst]),
        max_z=max_z,
        worst_index=worst,
        rate_upper=_clopper_pearson_upper(beyond, int(v.size), ci),
        ci_level=ci,
        expected_false=float(v.size * scipy_stats.norm.sf(k)),
    )


def saturation_point(
    x: ArrayLike,
    y: ArrayLike,
    eps: float,
    *,
    plateau: float | None = None,
    interpolate: bool = True,
) -> Saturation:
    """The smallest x from which on ``|y - plateau| <= eps`` (C6's m*, "within eps of the plateau").

    The plateau defaults to the value at the largest x. The grid point found is the first one from which on
    *every* later point is within eps (a single early point that dips into the band does not count). With
    ``interpolate``, ``x_star`` is where ``|y - plateau|`` crosses eps on the straight line in ``log x``
    between that point and the one before it, so that m* varies continuously rather than in grid steps.

    Args:
        x: strictly increasing grid, all > 0, at least 2 points.
        y: the metric at each x (finite).
        eps: half-width of the band around the plateau (> 0).
        plateau: the plateau value; ``None`` uses ``y[-1]``.
        interpolate: interpolate between grid points in log x.

    Raises:
        ValueError: on a non-increasing or non-positive grid, mismatched lengths, eps <= 0, a non-finite
            plateau, or when the last point is not within eps of the given plateau (nothing saturates).
    """
    gx = _as_finite_1d("x", x)
    gy = _as_finite_1d("y", y)
    if gx.shape != gy.shape or gx.size < 2:
        raise ValueError(f"x and y have {gx.size} and {gy.size} entries; pass equally many, at least 2.")
    if np.any(gx <= 0.0) or np.any(np.diff(gx) <= 0.0):
        raise ValueError("x must be > 0 and strictly increasing; sort the grid and drop duplicates.")
    if not (math.isfinite(eps) and eps > 0.0):
        raise ValueError(f"eps={eps!r} must be a finite number > 0.")
    level = float(gy[-1]) if plateau is None else float(plateau)
    if not math.isfinite(level):
        raise ValueError(f"plateau={plateau!r} must be finite.")
    distance = np.abs(gy - level)
    outside = np.flatnonzero(distance > eps)
    if outside.size and outside[-1] == gx.size - 1:
        raise ValueError(
            f"the last point y={gy[-1]!r} is not within eps={eps!r} of plateau={level!r}; extend the grid or "
            "check the plateau."
        )
    index = int(outside[-1]) + 1 if outside.size else 0
    if index == 0:
        return Saturation(x_star=float(gx[0]), plateau=level, index=0, censored=True)
    x_star = float(gx[index])
    if interpolate:
        d0, d1 = distance[index - 1], distance[index]
        t = (d0 - eps) / (d0 - d1)
        x_star = float(np.exp(np.log(gx[index - 1]) + t * (np.log(gx[index]) - np.log(gx[index - 1]))))
    return Saturation(x_star=x_star, plateau=level, index=index, censored=False)


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
        scale=1.0,
    )


def _parametric_bootstrap(
    lx: FloatArray,
    ly: FloatArray,
    sigma: FloatArray,
    rng: np.random.Generator,
    n_boot: int,
    ci: float,
    inflate_for_misfit: bool,
) -> SlopeFit:
    """WLS fit on the logs with weights 1/sigma^2 and a parametric-bootstrap interval for the slope."""
    weights = 1.0 / sigma**2
    slope, intercept = _wls(lx, ly, weights)
    fitted = intercept + slope * lx
    boot_ly = fitted + sigma * rng.standard_normal((n_boot, lx.size))
    boot_slopes = _wls_slopes(lx, boot_ly, weights)
    chi2 = _chi2(lx, ly, slope, intercept, sigma)
    scale = _misfit_scale(chi2, lx.size - 2) if inflate_for_misfit else 1.0
    lo, hi = _percentile_interval(boot_slopes, slope, ci, scale)
    return SlopeFit(
        slope=slope,
        intercept=intercept,
        ci_low=lo,
        ci_high=hi,
        ci_level=ci,
        slope_se=scale * float(boot_slopes.std(ddof=1)),
        n_points=int(lx.size),
        n_boot=n_boot,
        method="parametric-bootstrap",
        chi2=chi2,
        dof=int(lx.size - 2),
        scale=scale,
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


def _misfit_scale(chi2: float, dof: int) -> float:
    """The scale factor ``max(1, sqrt(chi2 / dof))`` (1 when there are no degrees of freedom)."""
    return max(1.0, math.sqrt(chi2 / dof)) if dof > 0 else 1.0


def _percentile_interval(samples: FloatArray, centre: float, ci: float, scale: float) -> tuple[float, float]:
    """Percentile interval of ``samples``, its distances from ``centre`` multiplied by ``scale``."""
    q_lo, q_hi = np.quantile(samples, [0.5 - ci / 2.0, 0.5 + ci / 2.0])
    return centre + scale * (float(q_lo) - centre), centre + scale * (float(q_hi) - centre)


def _clopper_pearson_upper(count: int, n: int, level: float) -> float:
    """One-sided exact binomial upper bound on a rate from ``count`` successes in ``n`` trials."""
    if count >= n:
        return 1.0
    return float(scipy_stats.beta.ppf(level, count + 1, n - count))


def _log_points(x: ArrayLike, y: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Validate a log-log data set and return ``(log x, log y)``."""
    gx = _as_finite_1d("x", x)
    gy = _as_finite_1d("y", y)
    if gx.shape != gy.shape:
        raise ValueError(f"x has {gx.size} entries but y has {gy.size}; pass one y per x.")
    if gx.size < _MIN_POINTS:
        raise ValueError(f"x has {gx.size} points; a slope with a CI needs at least {_MIN_POINTS}.")
    if np.any(gx <= 0.0):
        raise ValueError(f"x has entries <= 0 ({gx[gx <= 0.0][:3]}); a log-log fit needs x > 0.")
    if np.any(gy <= 0.0):
        raise ValueError(
            f"y has entries <= 0 ({gy[gy <= 0.0][:3]}); a log-log fit needs y > 0: drop points whose value "
            "is within its error of 0, or measure them more precisely."
        )
    if np.ptp(gx) == 0.0:
        raise ValueError("x has a single distinct value; a slope needs at least 2 distinct x values.")
    return np.log(gx), np.log(gy)


def _as_finite_1d(name: str, values: ArrayLike) -> FloatArray:
    """``values`` as a 1-D float64 array, raising ``ValueError`` if anything is NaN or infinite."""
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(array)):
        raise ValueError(
            f"{name} contains {int(np.sum(~np.isfinite(array)))} NaN/inf entries; pass finite numbers."
        )
    return array


def _check_boot(n_boot: int, ci: float) -> None:
    """Validate the bootstrap size and confidence level."""
    if n_boot < 100:
        raise ValueError(
            f"n_boot={n_boot!r} is too small for a percentile interval; use at least 100 (2000 typical)."
        )
    _check_level("ci", ci)


def _check_level(name: str, level: float) -> None:
    """Raise ``ValueError`` unless ``0 < level < 1``."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"{name}={level!r} must lie strictly between 0 and 1 (e.g. 0.95).")
